"""Reproductions of the papers' figures and tables, one module each, composing ``lens_heads``.

Each module runs as ``python -m analyses.<name> --model ... --out DIR``, writes its results
(tables, figures, reloadable result folders) and can be resumed: finished parts are reused.

* :mod:`analyses.mask_table` -- Heads up! Tables 1/2: a mask trained per built-in word task,
  Original / w/ instruction / w/ random M / w/ M.
* :mod:`analyses.figure6_alpha` -- Heads up! Figure 6 and Table 8: a mask's removed heads
  scaled by alpha, the instructed answer CE per alpha and the best-alpha comparison.
"""
