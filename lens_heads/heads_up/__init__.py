"""Heads up! (Han et al., ICML 2025): the analyses of trained head masks (layer 2).

It may import :mod:`lens_heads.core` and :mod:`lens_heads.engine`, never another research line.

* sweep, sweep_result -- one-by-one head removal: ranks, outputs, similarity (Fig. 2, 5, 8, 9)
* alpha -- masks scaled by alpha (Fig. 6, Table 8)
* similarity, similarity_stats -- layer similarity of settings (Fig. 4), over many prompts
* lens -- logit lens (Table 41) and top tokens (Table 4b)
* attention -- attention on the target word (Table 7)
* mask_stats -- mask statistics and tasks per head (Table 5)
* pathways, pathways_result -- common and unused heads of a task family (Table 6)
* figures -- their plotly figures
"""
