import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _import_unshadowed(name: str) -> None:
    """Import the installed package `name` before ROOT's top-level folder of that name can shadow it: with ROOT on
    sys.path (`python3 -m pytest` from it, and below, for `benchmarks`), ROOT/kernels (deltamup.kernels) would be
    found as `kernels`, the PyPI package transformers ≥ 5 imports (and with it fla's models)."""
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != ROOT]
    try:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    finally:
        sys.path[:] = saved


_import_unshadowed("kernels")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only (read when ray is first imported)
# Without a GPU the Triton kernels run in Triton's interpreter, which must be chosen before triton is first imported.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # Inductor's C++ kernels without SIMD (here and in every Ray worker, which inherits it): a fifth less compile time
    # on 2 cores (66 against 83 CPU-s for the compile cache test's model); the tests check what is compiled, traced
    # and cached, not how fast the generated code runs.
    os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    from fast_interpreter import speed_up  # noqa: E402

    speed_up()

# One intra-op thread per test process: pyproject's addopts run two pytest-xdist workers on a 2-core machine, and a
# second thread on tiny tensors mostly spins (test_coord_check + test_triton_kernels: 266 CPU-s with two threads,
# 209 with one, 10 s apart in wall time run alone).
torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(items):
    """pyproject's addopts run the suite on two pytest-xdist workers (--dist loadgroup): every test on the session's
    Ray cluster goes to one of them (the cluster starts once, and a test that kills a driver there is not starved by
    a second one), the others (test_ray_security's local Ray instance too) to either."""
    for item in items:
        if "cluster" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session")
def cluster():
    """A real Ray cluster for the session's sweep tests: two nodes of one CPU each, the second declaring one GPU (a
    Ray resource only: trials that get a share of it still train on the CPU here), the test process connected as
    the driver. Ray is imported here, not at the top: most tests never need it."""
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 100 * 2**20,
                                                      "include_dashboard": False})
    c.add_node(num_cpus=1, num_gpus=1, object_store_memory=100 * 2**20)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="WARNING", log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture
def kill_driver(cluster):
    """kill_driver(spec_path, out, until, timeout=180, settle=60, cpus_back=True, sig=SIGKILL): runs `deltamup sweep
    SPEC --out OUT` on the session's cluster in a subprocess, sends it `sig` once until() holds (or it has ended, or
    `timeout` s passed; SIGINT is what a time limit's `timeout -s INT` sends, and the driver stops its trials before
    it exits), then waits up to `settle` s until no actor of another job is alive (the killed driver's trials and a
    data-parallel trial's workers gone; detached ones, such as Ray Train's state actor, live on) and, with cpus_back,
    the cluster's two CPUs are free again (cpus_back=False where a placement group the killed driver leaked holds
    them until the resume releases it)."""
    import ray
    from ray._private.state import actors

    def others_alive() -> bool:
        me = ray.get_runtime_context().get_job_id()
        return any(a["State"] != "DEAD" and a["JobID"] != me and not a["IsDetached"] for a in actors().values())

    def kill(spec_path: Path, out: Path, until, timeout: float = 180.0, settle: float = 60.0,
             cpus_back: bool = True, sig: int = signal.SIGKILL) -> None:
        driver = subprocess.Popen([sys.executable, "-m", "deltamup", "sweep", str(spec_path), "--out", str(out),
                                   "--address", cluster.address], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while not until() and time.time() < deadline and driver.poll() is None:
            time.sleep(0.2)
        driver.send_signal(sig)
        driver.wait(timeout=settle)
        deadline = time.time() + settle
        while (others_alive() or (cpus_back and ray.available_resources().get("CPU", 0) < 2)) \
                and time.time() < deadline:
            time.sleep(0.2)

    return kill
