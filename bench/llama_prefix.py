"""A second question's prompt processing with and without KV prefix reuse: same questions, same run, alternating.

    python bench/llama_prefix.py BUNDLE GOLDEN      (the first two questions of GOLDEN; the packaged 270M)

`chat` keeps one answerer, so its Llama object keeps the previous prompt's KV cache and llama-cpp-python decodes
only from the first token where the new prompt differs; "without" resets the cache between the two questions.
Output: reports/bench-llama-prefix.txt.
"""

import json
import os
import statistics
import sys
from pathlib import Path

from retriever.answer.llama import LlamaAnswerer
from retriever.answer.prompt import context_notes
from retriever.retrieve import DEFAULT_SPEC, Retriever

bundle = Path(sys.argv[1])
golden = Path(sys.argv[2])
qs = [json.loads(line)["question"] for line in golden.read_text().splitlines()[:2]]
r = Retriever.open(bundle)
notes = [context_notes(r.search(q, DEFAULT_SPEC)) for q in qs]
a = LlamaAnswerer(answer_tokens=4)
a.answer(qs[0], notes[0])
a.answer(qs[1], notes[1])  # load and size once
res = {True: [], False: []}
for rnd in range(3):
    for reuse in (True, False):
        a.answer(qs[0], notes[0])  # first question of the "session"
        if not reuse:
            a._llm.reset()  # forget the KV cache: the second question starts cold
        a.answer(qs[1], notes[1])
        e = a.last_eval
        res[reuse].append(e.ms)
        print(
            f"round {rnd} reuse={reuse}: second question {e.tokens} tokens, decoded {e.evaluated} "
            f"(reused {e.reused}) in {e.ms:.0f} ms; load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
for reuse, v in res.items():
    print(f"reuse={reuse}: median {statistics.median(v):.0f} ms")
