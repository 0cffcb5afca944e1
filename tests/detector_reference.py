"""TransformerLens' own head-detector scores, the independent reference of the atlas's
detectors (unit tests on a tiny model, integration tests on SmolLM2)."""

from __future__ import annotations

import torch
import transformer_lens.head_detector as tl_detector

import lens_heads as lh

#: atlas detector name -> TransformerLens' detection pattern of it
PATTERNS = {
    "previous token": tl_detector.get_previous_token_head_detection_pattern,
    "duplicate token": tl_detector.get_duplicate_token_head_detection_pattern,
    "induction": tl_detector.get_induction_head_detection_pattern,
}


def transformer_lens_scores(model, tokens: torch.Tensor, name: str) -> torch.Tensor:
    """``[n_layers, n_heads]``: each head's ``"mul"`` score on the one sequence ``tokens``
    ``[1, pos]``, computed by TransformerLens from its own cache."""
    _, cache = model.run_with_cache(tokens, remove_batch_dim=True)
    detection = PATTERNS[name](tokens)
    layers, heads = lh.head_shape(model)
    return torch.tensor(
        [
            [
                tl_detector.compute_head_attention_similarity_score(
                    cache["pattern", layer][head],
                    detection,
                    exclude_bos=False,
                    exclude_current_token=False,
                    error_measure="mul",
                )
                for head in range(heads)
            ]
            for layer in range(layers)
        ]
    )
