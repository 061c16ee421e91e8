# SPDX-License-Identifier: MIT
"""The benchmark scripts' CPU smoke tests: two processes on Gloo, small
sizes, a few iterations, launched as torchrun would (without its agent)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import finish_world, free_port, start_world

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# Runs a benchmark script as `python3 benchmarks/<name>.py ARGS` does: its
# folder first on sys.path, so that it finds `common`.
RUN_SCRIPT = """
import runpy, sys
sys.path.insert(0, {folder!r})
sys.argv = [{script!r}, *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
"""


def run_benchmark(name: str, args: list[str], timeout: float = 120):
    script = str(BENCHMARKS / f"{name}.py")
    code = RUN_SCRIPT.format(folder=str(BENCHMARKS), script=script, args=args)
    # torch.distributed's store on MASTER_PORT; mdfuser's on a port of its own.
    env = {"MASTER_ADDR": "localhost", "MASTER_PORT": str(free_port())}
    results = finish_world(start_world(code, 2, env), timeout)
    for rank, result in enumerate(results):
        assert result.returncode == 0, f"rank {rank}:\n{result.stdout}\n{result.stderr}"
    return results


def test_ring_pairs_on_cpu(tmp_path):
    path = tmp_path / "rp.json"
    args = ["--device", "cpu", "--iters", "3", "--warmup", "1", "--json", str(path)]
    results = run_benchmark("ring_pairs", args)
    printed = results[0].stdout
    records = json.loads(path.read_text())
    timed = {(r["benchmark"], r["variant"], r["num_chunks"]) for r in records}
    for benchmark in ("ag_linear", "linear_rs"):
        assert f"{benchmark}: d=2 h=256 t=256" in printed
        for variant in ("mdfuser", "mdfuser_ring"):
            for s in (1, 2, 4):
                assert (benchmark, variant, s) in timed
        for variant in ("torch_no_overlap", "gemm_only", "comm_only"):
            assert (benchmark, variant, 1) in timed
        # CUDA only, skipped with the reason.
        assert f"skip: {benchmark} mdfuser_cuda: the CUDA backend needs CUDA tensors" in printed
        assert f"skip: {benchmark} torch_fused: torch's symmetric memory needs CUDA" in printed
    assert not any(r["variant"] in ("mdfuser_cuda", "torch_fused") for r in records)
    for r in records:
        assert r["world_size"] == 2 and r["dtype"] == "bfloat16" and r["device"] == "cpu"
        assert r["median_ms"] > 0 and r["vs_gemm_only"] > 0
        if r["variant"].startswith("mdfuser"):
            assert r["max_rel_err"] <= 2e-2
            assert r["floor_ratio"] > 0
    shapes = {(r["benchmark"], r["m"], r["n"], r["k"]) for r in records}
    assert shapes == {("ag_linear", 256, 512, 256), ("linear_rs", 256, 256, 512)}


def test_row_parallel_linear_on_cpu(tmp_path):
    path = tmp_path / "rpl.json"
    args = ["--device", "cpu", "--hidden", "64", "--tokens", "64", "--chunks", "1,2"]
    args += ["--iters", "2", "--warmup", "1", "--json", str(path)]
    run_benchmark("row_parallel_linear", args)
    records = json.loads(path.read_text())
    timed = {(r["variant"], r["num_chunks"]) for r in records}
    for s in (1, 2):
        # mdfuser_cuda is CUDA only.
        for variant in ("mdfuser", "mdfuser_copy", "mdfuser_pipeline", "mdfuser_ring"):
            assert (variant, s) in timed
    assert not any(r["variant"] == "mdfuser_cuda" for r in records)
    assert {"torch_no_overlap", "gemm_only", "allreduce_only"} <= {r["variant"] for r in records}
    for r in records:
        assert r["benchmark"] == "row_parallel_linear" and r["world_size"] == 2
        assert r["median_ms"] > 0


def test_transformer_blocks_with_rings_on_cpu(tmp_path):
    path = tmp_path / "blocks.json"
    args = ["--device", "cpu", "--blocks", "mlp", "--modes", "sp", "--chunks", "1,2"]
    args += ["--rings", "--iters", "2", "--warmup", "1", "--host-iters", "0"]
    args += ["--json", str(path)]
    run_benchmark("transformer_blocks", args)
    records = json.loads(path.read_text())
    timed = {(r["variant"], r["num_chunks"]) for r in records if r.get("median_ms")}
    for s in (1, 2):
        assert ("mdfuser", s) in timed and ("mdfuser_ring", s) in timed
    assert not any(r["variant"] == "mdfuser_cuda" for r in records)
    for r in records:
        if r["variant"] == "mdfuser_ring":
            assert r["max_rel_err"] <= 2e-2, r


def test_agreement_on_cpu(tmp_path):
    path = tmp_path / "agreement.json"
    results = run_benchmark("agreement", ["--device", "cpu", "--iters", "20", "--json", str(path)])
    assert "the comparison costs" in results[0].stdout
    records = {r["variant"]: r for r in json.loads(path.read_text())}
    assert set(records) == {"same", "alternating"}
    for r in records.values():
        assert r["world_size"] == 2 and r["iters"] == 20 and r["median_us"] > 0
        # No comparison leaves a key behind in the store.
        assert r["store_keys_per_call"] <= 0.1


def test_row_parallel_linear_traces_each_chunk_count_asked_for(tmp_path):
    traces = tmp_path / "traces"
    args = ["--device", "cpu", "--hidden", "64", "--tokens", "64", "--chunks", "1,2"]
    args += ["--iters", "1", "--warmup", "0", "--trace", str(traces), "--trace-chunks", "1,2"]
    run_benchmark("row_parallel_linear", args)
    names = sorted(p.name for p in traces.iterdir())
    assert names == [f"trace_s{s}_rank{r}.json" for s in (1, 2) for r in (0, 1)], names


def _kernel(name: str, start: float, dur: float, stream: int, cat: str = "kernel") -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": start,
        "dur": dur,
        "args": {"stream": stream},
    }


def test_trace_summary_of_a_call_between_two_meetings(tmp_path):
    """Two GEMMs overlapping by 5 us, a peer copy after the last, a local SM
    copy; the benchmark's meetings (a fill and an NCCL all-reduce) before
    and after the call are left out."""
    events = [
        _kernel("void at::native::vectorized_elementwise_kernel<FillFunctor>", 0, 1, 7),
        _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2, 8, 7),
        _kernel("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT", 10, 20, 20),
        _kernel("nvjet_sm90_tst_128x128_64x6_2x1_v_badd_TNT", 25, 20, 21),
        _kernel("Memcpy PtoP (Device -> Device)", 30, 25, 22, cat="gpu_memcpy"),
        _kernel("memcpy128", 50, 10, 20),
        _kernel("void at::native::vectorized_elementwise_kernel<FillFunctor>", 90, 1, 7),
        _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 8, 7),
    ]
    path = tmp_path / "trace_rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    import sys

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import trace_summary
    finally:
        sys.path.remove(str(BENCHMARKS))
    lines = trace_summary.summarize(str(path))
    assert lines[0].endswith("the call 0.050 ms of device time, 4 events"), lines
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:-1]}
    # kind: count, sum, union, at once
    assert rows["gemm"] == ["2", "0.040", "0.035", "1.14"], rows
    assert rows["peer"] == ["copy", "1", "0.025", "0.025", "1.00"], rows
    assert rows["local"] == ["copy", "1", "0.010", "0.010", "1.00"], rows
    assert lines[-1] == (
        "  before the first GEMM 0.000 ms; after the last 0.015 ms, "
        "peer copies running 0.010 ms of it"
    ), lines


def test_trace_summary_timeline_says_how_long_the_link_idles(tmp_path):
    """Two peer copies 12 us apart on two streams: the timeline lists the
    call's events from its start and the second copy's wait for the link."""
    events = [
        _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 2, 7),
        _kernel("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT", 10, 20, 20),
        _kernel("Memcpy PtoP (Device -> Device)", 30, 8, 22, cat="gpu_memcpy"),
        _kernel("Memcpy PtoP (Device -> Device)", 50, 8, 23, cat="gpu_memcpy"),
        _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 2, 7),
    ]
    path = tmp_path / "trace_rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    import sys

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import trace_summary
    finally:
        sys.path.remove(str(BENCHMARKS))
    rows = [line.split() for line in trace_summary.timeline(str(path))[1:]]
    # kind, stream, start, end, [link idle], name
    assert rows[0][:4] == ["gemm", "20", "0.0", "20.0"], rows
    assert rows[1][:5] == ["peer", "copy", "22", "20.0", "28.0"], rows
    assert rows[1][5] == "Memcpy", rows  # the first copy: no idle time before it
    assert rows[2][:6] == ["peer", "copy", "23", "40.0", "48.0", "12.0"], rows
