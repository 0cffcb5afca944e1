"""Which head finder to trust (issue 46): the faithfulness of every head ranking the toolkit
computes, measured as MIB measures circuits, on prompts with counterfactuals.

* counterfactuals -- IOI prompts and counterfactual pairs of the toolkit's tasks
* faithfulness -- a ranking's faithfulness curve, CPR and CMD with bootstrap intervals
* methods -- every head finder of the toolkit as a scoring method, timed
* benchmark -- :func:`head_finder_benchmark`: every method on every task, with a leaderboard
* mib -- the node-level submission format of MIB's circuit track: scores or circuits per size
* protocol -- :func:`run_protocol`: a claim decided under a frozen protocol file, on the test
  part no design choice has read, over seeds, with like-for-like baselines
"""

from typing import TYPE_CHECKING

from lens_heads.core.internal import lazy_exports

if TYPE_CHECKING:  # imported on first use (lens_heads.core._lazy): the package imports fast
    from lens_heads.finders._benchmark import (
        DEFAULT_METHODS,
        BenchmarkConfig,
        FinderBenchmark,
        head_finder_benchmark,
    )
    from lens_heads.finders._counterfactuals import (
        CounterfactualPair,
        CounterfactualSet,
        counterfactual_pairs,
        pair_key,
        protocol_split,
    )
    from lens_heads.finders._faithfulness import (
        SIZES,
        FaithfulnessConfig,
        FaithfulnessCurve,
        PairScorer,
        faithfulness,
    )
    from lens_heads.finders._methods import METHODS, MethodConfig
    from lens_heads.finders._mib import write_mib_circuits, write_mib_curve, write_mib_scores
    from lens_heads.finders._protocol import FinderProtocol, ProtocolResult, run_protocol

_EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "DEFAULT_METHODS",
    "METHODS",
    "SIZES",
    "BenchmarkConfig",
    "CounterfactualPair",
    "CounterfactualSet",
    "FaithfulnessConfig",
    "FaithfulnessCurve",
    "FinderBenchmark",
    "FinderProtocol",
    "MethodConfig",
    "PairScorer",
    "ProtocolResult",
    "counterfactual_pairs",
    "faithfulness",
    "head_finder_benchmark",
    "pair_key",
    "protocol_split",
    "run_protocol",
    "write_mib_circuits",
    "write_mib_curve",
    "write_mib_scores",
]
