"""Reproductions of the papers' figures and tables, one module each, composing ``lens_heads``.

Each module runs as ``python -m analyses.<name> --model ... --out DIR``, writes its results
(tables, figures, reloadable result folders) and can be resumed: finished parts are reused.

* :mod:`analyses.mask_table` -- Heads up! Tables 1/2: a mask trained per built-in word task,
  Original / w/ instruction / w/ random M / w/ M.
* :mod:`analyses.table5_mask_stats` -- Heads up! Table 5 (Tables 37-38) and §4: mask sizes,
  recall, Jaccard against its random expectation (eq. 4), tasks per head.
* :mod:`analyses.table6_pathways` -- Heads up! Table 6: removing the heads a task family
  shares, the heads it never uses, and random sets of the same sizes.
"""
