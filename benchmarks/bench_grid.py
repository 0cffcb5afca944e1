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

import tempfile
import time

from benchmarks.harness import BenchmarkResult

SMOLLM2_CELL_SECONDS = 144.0  # docs/training.md, machine A: "about 2.4 min per task"
TASKS = ["capitalize", "antonym", "country-capital", "present-past"]


def bench_grid_overhead(quick: bool) -> BenchmarkResult:
    import ray

    import lens_heads as lh
    from lens_heads.grid import run_grid

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
    started = time.perf_counter()
    for cell in config.cells:
        lh.train_mask(model, cell.task, config.training_config(cell), progress=False)
    loop = time.perf_counter() - started

    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - started
    try:
        with tempfile.TemporaryDirectory() as cold, tempfile.TemporaryDirectory() as warm:
            tick = time.perf_counter()
            run_grid(config, cold, progress=False)
            cold_grid = time.perf_counter() - tick
            tick = time.perf_counter()
            run_grid(config, warm, progress=False)  # workers alive, model loaded
            warm_grid = time.perf_counter() - tick
    finally:
        ray.shutdown()
    cells = len(config.cells)
    per_cell = (ray_start + cold_grid - loop) / cells
    warm_per_cell = (warm_grid - loop) / cells
    return BenchmarkResult(
        name="grid of 4 tiny trainings on Ray vs train_mask in a loop: overhead per cell / "
        "one SmolLM2 cell",
        baseline_s=SMOLLM2_CELL_SECONDS,
        candidate_s=per_cell,
        ratio=per_cell / SMOLLM2_CELL_SECONDS,
        target=0.10,
        higher_is_better=False,
        extra={
            "train_mask loop, 4 trainings (s)": round(loop, 2),
            "ray.init (s)": round(ray_start, 2),
            "grid, cold workers (s)": round(cold_grid, 2),
            "grid, warm workers (s)": round(warm_grid, 2),
            "overhead per cell incl. Ray and worker start (s)": round(per_cell, 2),
            "overhead per cell, warm workers (s)": round(warm_per_cell, 2),
            "SmolLM2 cell (s, docs/training.md)": SMOLLM2_CELL_SECONDS,
            "steps per training": steps,
        },
    )
