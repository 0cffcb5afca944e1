"""Reproductions of the papers' figures and tables, one module each, composing ``lens_heads``.

``python -m analyses`` lists them; ``python -m analyses.<name> --model ... --out DIR`` (or
``python -m analyses <name> ...``) runs one. Each module has ``run(config) -> result``, writes
its tables (CSV, markdown), figures (HTML) and reloadable result folders, and resumes: finished
stages are reused and an interrupted training continues from its checkpoint.

``python -m analyses`` lists every module with the first line of its docstring (found by
``analyses.__main__.available``, so a new module is listed as soon as it exists); how to add one
is in ``docs/architecture.md``.
"""
