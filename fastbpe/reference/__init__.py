"""The specification: pure-Python twins of every native path (``bpe``, ``core``,
``wordpiece``, ``documents``, ``jsonl``, ``patterns``). Tests compare the native code
with these, id for id; they import nothing above ``fastbpe.special``.

>>> from fastbpe.reference import patterns
>>> patterns.resolve_pattern("gpt2") == patterns.GPT2
True
"""
