"""Side-by-side benchmarks: prompt suites (MT-Bench, HumanEval, JSONL), HF baselines, and the report
with its ratios."""
