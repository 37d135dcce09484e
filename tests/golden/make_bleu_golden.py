"""Golden test data for the kit's C++ BLEU (tests/bleu_test.cpp, common/src/metrics/bleu.cpp).

sacrebleu is the oracle, with the default the exercise reports: BLEU().corpus_score(hyps,
[refs]) (13a tokenisation, n-grams up to 4, smooth_method="exp", no effective order, case kept).

Rerun (from the repo root; tooling only, the kit never runs Python):

    tests/golden/setup_venv.sh && .venv-golden/bin/python tests/golden/make_bleu_golden.py

Generated with: sacrebleu 2.6.0, Python 3.11. The output is deterministic: rerunning rewrites a
byte-identical file.

Writes tests/golden/bleu/cases.json:
  "corpora":  per case, the hypotheses, each hypothesis's references (a list; sacrebleu takes the
              transpose, padded with None where a segment has fewer) and what corpus_score
              returned: score, counts (matches), totals, precisions, bp, sys_len, ref_len.
              Floats are written with repr(), so they read back bit for bit.
  "tokenize": per text, what BLEU's preprocessing (rstrip, then the 13a tokenizer) makes of it:
              hand-picked corner cases, then random strings over an alphabet of the characters
              the tokenizer treats specially.
"""

import json
import os
import random

import sacrebleu
from sacrebleu.metrics import BLEU

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "bleu")

# English sentences of the kind the exercise translates into; the "realistic" cases perturb them.
SENTENCES = [
    "And that's what I want to talk to you about today.",
    "We were all very surprised when the results came in.",
    "It costs about 1,500 dollars, which is 3.5 times more than last year.",
    "She said: \"I've never seen anything like it.\"",
    "The brain is a complex, self-organizing system.",
    "So, what does this mean for the 21st century?",
    "In 2008, about 40 percent of the world's population lived in cities.",
    "My grandmother -- she's 92 -- still reads every day.",
    "Thank you very much.",
    "(Laughter) (Applause)",
    "This is a well-known problem in computer science.",
    "What would you do if you weren't afraid?",
    "The temperature dropped from 20 to -5 degrees in two days.",
    "Here's the thing: nobody knows exactly how it works.",
    "We need to think about this in a completely different way.",
    "I grew up in a small town in the south of Germany.",
    "There are 7.5 billion people on this planet.",
    "Look at this picture; what do you see?",
    "It was the best of times, it was the worst of times.",
    "Now, let me show you something really interesting.",
]


def perturb(sentence, rng):
    """A plausible system output: words dropped, swapped, replaced or repeated."""
    words = sentence.split()
    for _ in range(rng.randint(0, 3)):
        op = rng.choice(["drop", "swap", "replace", "repeat"])
        i = rng.randrange(len(words))
        if op == "drop" and len(words) > 1:
            del words[i]
        elif op == "swap" and i + 1 < len(words):
            words[i], words[i + 1] = words[i + 1], words[i]
        elif op == "replace":
            words[i] = rng.choice(["the", "a", "it", "is", "very", "people", "."])
        else:
            words.insert(i, words[i])
    return " ".join(words)


def realistic_cases():
    rng = random.Random(11868)
    hyps = [perturb(s, rng) for s in SENTENCES]
    two_refs = [[s, perturb(s, rng)] for s in SENTENCES]
    return [
        ("realistic_one_reference", hyps, [[s] for s in SENTENCES]),
        ("realistic_two_references", hyps, two_refs),
        ("realistic_truncated_outputs", [" ".join(s.split()[: max(1, len(s.split()) // 2)])
                                         for s in SENTENCES], [[s] for s in SENTENCES]),
    ]


# (name, hypotheses, references of each hypothesis)
CASES = [
    ("perfect_match", ["The cat sat on the mat."], [["The cat sat on the mat."]]),
    ("perfect_match_corpus", SENTENCES[:5], [[s] for s in SENTENCES[:5]]),
    ("empty_hypothesis", [""], [["The cat sat on the mat."]]),
    ("empty_hypothesis_and_reference", [""], [[""]]),
    ("empty_reference", ["The cat sat on the mat."], [[""]]),
    ("one_empty_hypothesis_in_corpus", ["", "the cat sat on the mat"],
     [["a dog barked"], ["the cat sat on the mat"]]),
    ("no_match_at_all", ["completely different words here"], [["the cat sat on the mat"]]),
    ("unigrams_only", ["mat the on sat cat the"], [["the cat sat on the mat"]]),
    ("no_4gram_match", ["the cat sat on a mat"], [["the cat sat in the mat"]]),
    ("no_3gram_or_4gram_match", ["the cat x sat on y the mat"], [["the cat sat on the mat"]]),
    ("shorter_than_any_4gram", ["the cat sat"], [["the cat sat on the mat"]]),
    ("hypothesis_shorter", ["the cat sat on the"], [["the cat sat on the mat today"]]),
    ("hypothesis_longer", ["the cat sat on the mat today and yesterday too"],
     [["the cat sat on the mat"]]),
    ("clipped_repetition", ["the the the the the the the"], [["the cat is on the mat"]]),
    ("case_is_kept", ["The Cat Sat On The Mat"], [["the cat sat on the mat"]]),
    ("already_tokenized_period", ["the cat sat on the mat ."], [["the cat sat on the mat."]]),
    ("punctuation", ["Hello, world! (Yes) [no] {maybe} a/b a:b x@y #tag 100% a&b a*b+c=d ~^_`|"],
     [["Hello , world ! ( Yes ) [ no ] { maybe } a / b a : b x @ y # tag 100 % a & b"]]),
    ("numbers", ["It costs 1,000.50 dollars, or 3.14 times 2,5 -- version 2.0."],
     [["It costs 1,000.50 dollars , or 3.14 times 2,5 -- version 2.0 ."]]),
    ("number_edges", ["5. .5 ,5 5, a.b a,b 1..2 3.,4 ... ,,, 5.5.5 1,2,3"],
     [["5 . .5 ,5 5 , a . b a , b 1..2 3.,4 . . . , , , 5.5.5 1,2,3"]]),
    ("dashes", ["well-known 5-3 2-fold a -b - c 10-20 x--y -- 3--4 a-1"],
     [["well-known 5 - 3 2 - fold a -b - c 10 - 20 x--y -- 3 - -4 a-1"]]),
    ("dash_newline_is_joined", ["hyph-\nenated and line\nbreak"], [["hyphenated and line break"]]),
    ("quotes", ["“curly” ‘single’ „German“ «guillemets» 'straight' \"double\" it's"],
     [["\" curly \" ' single ' German guillemets 'straight' \" double \" it 's"]]),
    ("entities", ["&quot;Hi&quot; &amp; &lt;b&gt; &amp;quot; &apos; &#39; & amp"],
     [["\"Hi\" & <b> &quot; ' ' & amp"]]),
    ("skipped_marker", ["the <skipped> cat sat on the mat"], [["the cat sat on the mat"]]),
    ("non_ascii", ["Straße, Ünïcödé 日本語 é.a é. .é naïve café"],
     [["Straße , Ünïcödé 日本語 é . a é . . é naive cafe"]]),
    ("trailing_and_leading_spaces", ["   the cat sat on the mat   \t\n"],
     [["the cat  sat on\tthe mat"]]),
    ("unicode_spaces", ["the\u00a0cat\u3000sat\u2028on\u2009the\u0085mat\u200bnow"],
     [["the cat sat on the mat\u200bnow"]]),
    ("trailing_dash_newline", ["the cat sat on the mat-\n"], [["the cat sat on the mat-"]]),
    ("two_references_clip_at_max", ["the the the cat cat"],
     [["the cat the", "the the cat cat dog"]]),
    ("closest_reference_tie_takes_shorter", ["a b c d e f"],
     [["a b c d e f g h", "a b c d"]]),
    ("closest_reference_is_longer", ["a b c d e f g"], [["a b c d", "a b c d e f g h"]]),
    ("variable_reference_count", ["the cat sat on the mat", "a dog barked at the moon"],
     [["the cat sat on the mat", "a cat sat on a mat"], ["a dog barked at night"]]),
    ("many_short_segments", ["yes", "no", "thank you", "ok ."], [["yes"], ["no ."], ["thank you ."], ["ok"]]),
] + realistic_cases()

TOKENIZE_TEXTS = [
    "", " ", "\n", "a", "Hello, world!", "1,000.50", "a.b", "5.", ".5", "a...", "1..2", "3.,4",
    "5-3", "a-3", "3-a", "x--y", "5--3", "-5", "hyph-\nen", "end-\n", "end-", "line\nbreak",
    "&quot;x&quot;", "&amp;quot;", "&AMP;", "&lt;&gt;", "a&b", "&", "<skipped>", "<skip ped>",
    "it's", "'quoted'", "“curly”", "tab\there", "nbsp\u00a0here", "ideo\u3000space",
    "line\u2028sep", "nel\u0085x", "zw\u200bsp", "trailing \u00a0\u3000", "日本語。", "é.", ".é",
    "$5.00!", "(a) [b] {c}", "a/b\\c", "x@y.com", "~^_`|", "100%", "a*b+c=d", "1.000,5", "U.S.A.",
]

# Characters the 13a rules single out, plus ordinary ones; random strings over them probe the
# order of the substitutions and their non-overlapping matches.
FUZZ_ALPHABET = list("ab19.,-&;<>quot\n \t'\"/()") + ["\u00a0", "é", "日", "&quot;", "&amp;", "-\n"]


def fuzz_texts(count=150, seed=868):
    rng = random.Random(seed)
    return ["".join(rng.choice(FUZZ_ALPHABET) for _ in range(rng.randint(1, 24)))
            for _ in range(count)]


def score_case(name, hyps, ref_sets):
    assert len(hyps) == len(ref_sets), name  # sacrebleu would silently drop the extra ones
    width = max(len(r) for r in ref_sets)
    streams = [[refs[k] if k < len(refs) else None for refs in ref_sets] for k in range(width)]
    result = BLEU().corpus_score(hyps, streams)
    return {"name": name, "hypotheses": hyps, "references": ref_sets, "score": result.score,
            "counts": list(result.counts), "totals": list(result.totals),
            "precisions": list(result.precisions), "bp": result.bp,
            "sys_len": result.sys_len, "ref_len": result.ref_len}


def main():
    assert sacrebleu.__version__ == "2.6.0", sacrebleu.__version__
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    corpora = [score_case(*case) for case in CASES]
    bleu = BLEU()
    bleu.corpus_score(["a"], [["a"]])  # the signature names the number of references
    texts = TOKENIZE_TEXTS + fuzz_texts()
    tokenize = [{"text": t, "tokens": bleu._preprocess_segment(t)} for t in texts]

    lines = ["{",
             ' "generator": "tests/golden/make_bleu_golden.py",',
             f' "sacrebleu": {json.dumps(sacrebleu.__version__)},',
             f' "signature": {json.dumps(str(bleu.get_signature()))},']
    for key, cases, last in (("corpora", corpora, False), ("tokenize", tokenize, True)):
        lines.append(f' "{key}": [')
        for i, case in enumerate(cases):
            sep = "," if i + 1 < len(cases) else ""
            lines.append("  " + json.dumps(case, ensure_ascii=False) + sep)
        lines.append(" ]" + ("" if last else ","))
    lines.append("}")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}/cases.json: {len(corpora)} corpora, {len(tokenize)} tokenizer texts")
    for c in corpora:
        print(f"  {c['name']:40s} {c['score']:.4f}")


if __name__ == "__main__":
    main()
