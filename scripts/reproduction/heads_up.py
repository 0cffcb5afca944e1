"""The Heads up! rows of docs/reproduction.md (Han et al., ICML 2025, and its rebuttal)."""

from __future__ import annotations

from reproduction import NOT_COVERED, Load, Row, table
from reproduction.heads_up_results import (
    demo_tasks,
    few_heads_verdict,
    figure2,
    figure2_verdict,
    figure3,
    figure3_verdict,
    figure4,
    figure4_verdict,
    figure5,
    figure5_verdict,
    figure6_both,
    figure6_both_verdict,
    figure7,
    figure7_verdict,
    figure8,
    figure8_verdict,
    figure9,
    figure9_verdict,
    gemma_words,
    random_everywhere,
    random_everywhere_verdict,
    table1,
    table1_verdict,
    table2_verdict,
    table3,
    table3_like,
    table3_verdict,
    table4,
    table4_verdict,
    table5,
    table6,
    table6_shared_verdict,
    table6_unused_verdict,
    table7,
    table7_like,
    table7_verdict,
    table8_translation,
    table8_translation_verdict,
    table41,
    table41_verdict,
    tasks_per_head,
    tasks_per_head_verdict,
)

HEADS_UP: list[tuple[str, Row]] = [
    (
        "Table 1 (§3.4)",
        Row(
            "A mask trained without instruction makes the model translate without being told, "
            "at or below the instructed model's PPL; a random mask of the same size does not.",
            "Table 1, XNLI, PPL original / instructed / random M / M. Llama3.1-8B-inst: en-fr "
            "2.172 / 0.619 / 2.370 / 0.552 (860 of 1,024 heads; ROUGE-L 0.082 / 0.541 / 0.711), "
            "en-de 2.314 / 0.627 / 2.482 / 0.580, en-es 2.319 / 0.550 / 2.762 / 0.504, en-zh "
            "2.643 / 1.091 / 2.909 / 1.017. The base Llama3.1-8B (the closer kind to Gemma 3 "
            "270M base): en-fr 1.672 / 1.240 / 2.329 / 0.585 (ROUGE-L 0.072 / 0.084 / 0.658), "
            "en-de 1.780 / 1.258 / 2.133 / 0.660, en-es 1.853 / 1.350 / 2.337 / 0.577, en-zh "
            "2.308 / 1.901 / 2.703 / 1.158.",
            table1,
            "no: a 270M base model (judged with two demonstrations) and a 135M instruct model, "
            "built-in sentences, answer CE for PPL",
            table1_verdict,
        ),
    ),
    (
        "Table 2, Tables 32-35",
        Row(
            "On simple tasks the masked model without instruction answers far more often than the "
            "model without it, and on the instruct Llama more often than with the instruction.",
            "Llama3.1-8B-inst capitalize 0.10 / 1.00 / 0.98 (original / instructed / M), "
            "antonym 0.12 / 0.30 / 0.76; mean of 36 tasks 0.05 / 0.44 / 0.81 (Table 32). On "
            "Qwen2.5-7B-inst M is below the instruction on average: 0.64 vs 0.69 (Table 34).",
            demo_tasks,
            "no: 135M model that fails most tasks even when instructed",
            table2_verdict,
        ),
    ),
    (
        "Table 1, random M",
        Row(
            "A random mask with as many heads raises PPL above the untouched model's.",
            "Llama3.1-8B-inst: random M above original on all 6 en-X pairs (en-fr 2.370 vs 2.172).",
            random_everywhere,
            "partly: the translation pairs are the paper's task, on a 270M base model",
            random_everywhere_verdict,
        ),
    ),
    (
        "Figure 2",
        Row(
            "Removing heads in ascending mask weight, the task answer becomes top-1 before all "
            "heads outside M are gone.",
            "Llama3.1-8B-inst, one sentence, en-zh: switch at 162 of the 192 heads outside M "
            "(84 %); language lost after 528.",
            figure2,
            "partly: same procedure, word task, many words instead of one sentence",
            figure2_verdict,
        ),
    ),
    (
        "Figure 3",
        Row(
            "During training some heads are selected and later dropped as others join, and some "
            "join late: membership depends on the other heads.",
            "No counts (the figure's model, task and init are not stated).",
            figure3,
            "partly: the paper gives no numbers to compare",
            figure3_verdict,
        ),
    ),
    (
        "Figure 4",
        Row(
            "In the later layers the masked model's states are closer to the instructed model's "
            "than the original model's are.",
            "Llama3.1-8B-inst, one sentence, en-zh; curves only, no numbers.",
            figure4,
            "partly: same measure, word task, many words",
            figure4_verdict,
        ),
    ),
    (
        "Figure 5",
        Row(
            "Along the Figure 2 sweep, deep-layer similarity to the instructed run rises and "
            "settles once the heads outside M are gone; shallow layers fall slightly.",
            "Llama3.1-8B-inst: settles after 192 heads removed (= the heads outside M).",
            figure5,
            "partly: one word and a smaller model",
            figure5_verdict,
        ),
    ),
    (
        "Figure 6",
        Row(
            "With the instruction, scaling the heads outside M by a small α gives a lower PPL than "
            "α = 1 and α = 0.",
            "Llama3.1-8B-inst, 6 XNLI pairs: α = 0 below α = 1 on all six; lowest near α = 0.2-0.3.",
            figure6_both,
            "partly: translation on Gemma is the paper's task; capitalize on SmolLM2 is not",
            figure6_both_verdict,
        ),
    ),
    (
        "Table 8",
        Row(
            "Adding the mask to the instructed model raises BLEU; the scaled mask adds a very small "
            "further gain.",
            "Llama3.1-8B-inst, IWSLT2017, BLEU instructed / M / scaled M: en-fr 0.699 / 0.716 / "
            "0.717, en-de 0.657 / 0.674 / 0.678; scaled beats M on 4 of 6 pairs.",
            table8_translation,
            "partly: the paper's metric and task (BLEU, translation), a 270M base model",
            table8_translation_verdict,
        ),
    ),
    (
        "Figure 7",
        Row(
            "Removed heads show no layer pattern (the later half keeps slightly more) and do not "
            "form whole KV groups.",
            "Llama3.1-8B-inst, 42 translation masks; no numbers.",
            figure7,
            "partly: one capitalize mask instead of the paper's translation masks",
            figure7_verdict,
        ),
    ),
    (
        "Figure 8 (C.3.1)",
        Row(
            "Re-ordering the first heads by single-head influence lifts the answer's rank early "
            "but *postpones* the switch.",
            "Llama3.1-8B-inst, one sentence: about 290 heads against 162 in ascending order.",
            figure8,
            "partly: same procedure (the paper's share re-ordered), word task, many words",
            figure8_verdict,
        ),
    ),
    (
        "Figure 9 (C.3.1)",
        Row(
            "Sweeping by a negative-init mask's weights switches much later than by the "
            "positive-init mask.",
            "Llama3.1-8B-inst: the 355th head against the 162nd.",
            figure9,
            "no: init 0 (init -3 does not train here), one word",
            figure9_verdict,
        ),
    ),
    (
        "Table 6 (a)",
        Row(
            "Removing the heads every mask of a family keeps hurts the instructed model far more "
            "than removing as many random heads.",
            "Llama3.1-8B-inst, 42 translation masks from init -3: 177 shared heads, en-fr PPL 4.129 "
            "against 0.792 for random sets (worse on 6 of 6).",
            lambda load: table6(load, "shared"),
            "no: a few masks per family (their tasks), init 0, answer CE",
            table6_shared_verdict,
        ),
    ),
    (
        "Table 6 (b)",
        Row(
            "Removing the heads no mask of the family uses makes the instructed model slightly "
            "*better*.",
            "Llama3.1-8B-inst: 47 unused heads, PPL lower on all 6 pairs (en-fr 0.619 → 0.577; "
            "random sets 0.688).",
            lambda load: table6(load, "unused"),
            "no: a few masks per family make a loose 'unused' set",
            table6_unused_verdict,
        ),
    ),
    (
        "Table 6 'en'",
        Row(
            "The heads shared by the 12 English-related translation masks matter even more.",
            "741 heads kept: PPL 6.137-7.029 against 1.480-3.325 for random sets.",
            "Not covered: needs the paper's English-related translation masks of one model.",
            "",
            NOT_COVERED,
        ),
    ),
    (
        "Table 3",
        Row(
            "Masks trained on 5-shot prompts beat the instructed 5-shot model; one hybrid mask over "
            "32 tasks helps each, including a task it never saw.",
            "Llama3.1-8B-inst, 5-shot accuracy original / instructed / per-task M / hybrid M: "
            "sentiment 0.96 / 0.97 / 0.99 / 0.98, antonym 0.56 / 0.67 / 0.73 / 0.69, capitalize "
            "first letter 0.95 / 1.00 / 0.99 / 1.00, fruit v animal 0.98 / 1.00 / 1.00 / 1.00; "
            "unseen product-company 0.77 / 0.84 / 0.88 / 0.88.",
            table3,
            table3_like,
            table3_verdict,
        ),
    ),
    (
        "Table 4 (§3.4)",
        Row(
            "Larger models trigger translation through the mask more reliably; the top tokens "
            "under the mask lean to the target language.",
            "Qwen2.5-0.5B/1.5B/larger-inst, one sentence; 0.5B en-de answers in English.",
            table4,
            "no: one size, base model, built-in sentences",
            table4_verdict,
        ),
    ),
    (
        "Table 5, Tables 37-38",
        Row(
            "The same task's masks on an instruct and a base model of one shape overlap more than "
            "random masks; the base mask sits mostly inside the instruct mask.",
            "Llama3.1-8B-inst vs 8B, en-fr Jaccard 0.766 vs random 0.687; sentiment 0.591 vs 0.531; "
            "recall 0.748-0.951 (Table 37).",
            table5,
            "no: a different comparison",
            "not measurable here",
        ),
    ),
    (
        "Table 7",
        Row(
            "The mask does not pick heads by attention: kept heads do not attend more to the answer "
            "word than dropped ones, with or without the instruction.",
            "Llama3.1-8B-inst, normalised over the 3 candidates: fruit_v_animal original 0.347, "
            "instructed 0.468 (M 0.462 / 1-M 0.494), under M: M 0.566 / 1-M 0.607; 1-M above M "
            "under M on 3 of 4 tasks.",
            table7,
            table7_like,
            table7_verdict,
        ),
    ),
    (
        "Table 41 (C.4)",
        Row(
            "In the later layers the instructed and masked runs share many top-5 tokens; both "
            "reach the answer.",
            "Llama3.1-8B-inst, one sentence: 2-3 shared top-5 tokens in layers 22-30 (0-1 for "
            "original~masked); 我 top-1 at layer 31 in both runs.",
            table41,
            "partly: same measure, word task",
            table41_verdict,
        ),
    ),
    (
        "C.1, §3.4",
        Row(
            "Models with few heads form masks poorly: Gemma2-2B-inst (208 heads) fails every "
            "translation pair; Qwen2.5-0.5B-inst (336) is the weak case.",
            "No Gemma numbers; Qwen2.5-0.5B-inst M below the instruction on 7 of 42 pairs (Table 16).",
            gemma_words,
            "no: base model, word tasks",
            few_heads_verdict,
        ),
    ),
    (
        "Rebuttal Q1",
        Row(
            "Each head serves fewer tasks as models grow.",
            "Qwen2.5-1.5B/3B/7B/14B, 28 tasks: 12.97 / 12.94 / 11.07 / 10.61 tasks per head.",
            tasks_per_head,
            "no: one size, denser masks (positive init)",
            tasks_per_head_verdict,
        ),
    ),
    (
        "C.3.2, C.3.3",
        Row(
            "Masking inside the softmax (query side) rarely triggers the task; FFN gates drop one "
            "layer on only 8 translation tasks, at a cost.",
            "Table 39 (failure cases), Table 40 (en-X PPL 1.130-1.915 with FFN gates).",
            "Not run: `train_mask(..., site='query')` and `ffn=True` exist; no stored result.",
            "",
            NOT_COVERED,
        ),
    ),
]


def heads_up_table(load: Load) -> str:
    return table(HEADS_UP, load)
