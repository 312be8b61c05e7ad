import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Without a GPU the Triton kernels run in Triton's interpreter, which must be chosen before triton is first imported.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def cluster():
    """A real Ray cluster shared by the session's sweep tests: two nodes of one CPU each, the second declaring one
    GPU (a Ray resource only: trials that get a share of it still train on the CPU here), the test process
    connected as the driver."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only (read when ray is imported)
    import ray  # Ray only for the tests that use the cluster
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 100 * 2**20,
                                                      "include_dashboard": False})
    c.add_node(num_cpus=1, num_gpus=1, object_store_memory=100 * 2**20)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="WARNING", log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()
