"""Grid benchmark (issue 16): the overhead of running mask trainings as Ray grid cells.

``bench_grid_overhead``: 4 short tiny-model trainings run as a grid on a local Ray instance
(one cell at a time: ``num_cpus`` = the whole instance, so the comparison measures overhead,
not parallelism) against ``train_mask`` called in a loop on one loaded model. The grid's extra
time per cell (Ray start and worker start amortised over the 4 cells, scheduling, the claim,
checkpoints, saving the result folder and its figures, assembling the table) is compared with
the time of one SmolLM2 cell of the short schedule: about 144 s on the reference machine
(``docs/training.md``: 75-110 s of training plus evaluation per task, 2.4 min in all). Target:
overhead <= 10 % of that cell.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from benchmarks.harness import BenchmarkResult, time_call

SMOLLM2_CELL_SECONDS = 144.0  # docs/training.md, machine A: "about 2.4 min per task"
TASKS = ["capitalize", "antonym", "country-capital", "present-past"]


def bench_grid_overhead(quick: bool) -> BenchmarkResult:
    import ray

    import lens_heads as lh
    from lens_heads.scale.grid import run_grid

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
    return BenchmarkResult(
        name="grid of 4 tiny trainings on Ray vs train_mask in a loop: overhead per cell / "
        "one SmolLM2 cell",
        baseline_s=SMOLLM2_CELL_SECONDS,
        candidate_s=per_cell,
        ratio=per_cell / SMOLLM2_CELL_SECONDS,
        target=0.10,
        higher_is_better=False,
        extra={
            "train_mask loop, 4 trainings (s)": round(loop_cold, 2),
            "ray.init (s)": round(ray_start, 2),
            "grid, cold workers (s)": round(cold, 2),
            "overhead per cell incl. Ray and worker start (s)": round(per_cell, 2),
            "(loop s, grid s) with warm workers": [(round(b, 1), round(g, 1)) for b, g in pairs],
            "overhead per cell, warm workers, median (s)": round(warm, 2),
            "SmolLM2 cell (s, docs/training.md)": SMOLLM2_CELL_SECONDS,
            "steps per training": steps,
            "load average (1 min) at the end": round(os.getloadavg()[0], 1),
        },
    )
