"""kernels.bench's reading of fla's columns from an earlier output (the file holds more tables after the first)."""
from benchmarks.kernels import earlier_fla


def test_earlier_fla_reads_only_the_first_table(tmp_path):
    path = tmp_path / "kernels.md"
    path.write_text(
        "# run\n\n| shape (B, T, H, K, V) | ours fwd ms | ours fwd+bwd ms | fla fwd ms | fla fwd+bwd ms |\n"
        "| --- | --- | --- | --- | --- |\n"
        "| 8, 2048, 6, 64, 128 | 0.5 | 1.8 | 1.453 | 3.968 |\n"
        "| 8, 2048, 6, 32, 64 | 0.3 | 1.5 | crash: illegal memory access | – |\n\n"
        "## Before → after\n\n| shape (B, T, H, K, V) | before fwd ms | after fwd ms | before fwd+bwd | after |\n"
        "| --- | --- | --- | --- | --- |\n"
        "| 8, 2048, 6, 64, 128 | 0.655 | 0.548 | 1.561 | 1.817 |\n")
    assert earlier_fla(str(path)) == {"8, 2048, 6, 64, 128": [1.453, 3.968],
                                      "8, 2048, 6, 32, 64": "crash: illegal memory access"}
