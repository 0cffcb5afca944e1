"""Grid benchmark (issue 16): the overhead of running mask trainings as Ray grid cells.

``bench_grid_overhead``: 4 short tiny-model trainings run as a grid on a local Ray instance
(one cell at a time: ``num_cpus`` = the whole instance, so the comparison measures overhead,
not parallelism) against ``train_mask`` called in a loop on one loaded model. The grid's extra
time per cell (Ray start and worker start amortised over the 4 cells, scheduling, the claim,
checkpoints, saving the result folder and its figures, assembling the table) is compared with
the time of one SmolLM2 cell of the short schedule (200 steps and its evaluation; ``quick``: 20
steps), measured in the same run through the same grid code in this process. Target: overhead
<= 10 % of that cell.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from benchmarks.harness import BenchmarkResult, time_call

TASKS = ["capitalize", "antonym", "country-capital", "present-past"]


def smollm2_cell_seconds(steps: int) -> float:
    """Wall time of one SmolLM2 capitalize cell of the short schedule, run in this process by
    the grid (training, evaluation, the cell's folder), the model already loaded."""
    import lens_heads as lh
    from lens_heads.scale._grid import run_grid

    text = f"""
name = "bench-cell"
models = ["smollm2-135m-instruct"]
tasks = ["capitalize"]
[schedules.short]
steps = {steps}
batch_size = 8
"""
    config = lh.GridConfig.from_text(text)
    with tempfile.TemporaryDirectory() as warm:  # loads and caches the model in this process
        run_grid(lh.GridConfig.from_text(text.replace(f"steps = {steps}", "steps = 1")), warm,
                 address="local", progress=False)  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        return time_call(lambda: run_grid(config, out, address="local", progress=False))


def bench_grid_overhead(quick: bool) -> BenchmarkResult:
    import ray

    import lens_heads as lh
    from lens_heads.scale._grid import run_grid

    steps = 20 if quick else 40
    text = f"""
name = "bench"
models = ["tiny-2x4"]
tasks = {TASKS!r}
evaluate = false
[schedules.short]
steps = {steps}
batch_size = 8
n_eval = 8
dtype = "float32"
[resources]
num_cpus = 2
"""
    config = lh.GridConfig.from_text(text.replace("'", '"'))
    model = lh.tiny_model(2, 4)
    cells = len(config.cells)

    def loop() -> None:
        for cell in config.cells:
            lh.train_mask(model, cell.task, config.training_config(cell), progress=False)

    def grid() -> None:
        with tempfile.TemporaryDirectory() as out:
            run_grid(config, out, progress=False)

    loop_cold = time_call(loop)
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - started
    try:
        cold = time_call(grid)  # worker processes start, import torch and build the model
        pairs = [(time_call(loop), time_call(grid)) for _ in range(1 if quick else 3)]
    finally:
        ray.shutdown()
    per_cell = (ray_start + cold - loop_cold) / cells
    warm = statistics.median((g - b) / cells for b, g in pairs)
    cell_steps = 20 if quick else 200
    cell_seconds = smollm2_cell_seconds(cell_steps)
    return BenchmarkResult(
        name="grid of 4 tiny trainings on Ray vs train_mask in a loop: overhead per cell / "
        "one SmolLM2 cell",
        baseline_s=cell_seconds,
        candidate_s=per_cell,
        ratio=per_cell / cell_seconds,
        target=0.10,
        higher_is_better=False,
        extra={
            "train_mask loop, 4 trainings (s)": round(loop_cold, 2),
            "ray.init (s)": round(ray_start, 2),
            "grid, cold workers (s)": round(cold, 2),
            "overhead per cell incl. Ray and worker start (s)": round(per_cell, 2),
            "(loop s, grid s) with warm workers": [(round(b, 1), round(g, 1)) for b, g in pairs],
            "overhead per cell, warm workers, median (s)": round(warm, 2),
            f"SmolLM2 cell, {cell_steps} steps and evaluation, this run (s)": round(
                cell_seconds, 1
            ),
            "steps per training": steps,
            "load average (1 min) at the end": round(os.getloadavg()[0], 1),
        },
    )
