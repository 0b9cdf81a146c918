"""Benchmarks: what kpurgatory costs against what a user would pick instead.

``kpurgatory bench`` (``cli``) answers, per build (pure and mypyc-compiled): timer
add+cancel against asyncio's ``call_at`` and a heapq timer (``timers``), the full
lifecycle and its memory (``timers``), long-poll CPU against plain asyncio
(``longpoll``), all run by pyperf (``suite``); and the enqueue plateau of Kafka's
"Purgatory Redesign Proposal" against Kafka 0.8's design (``enqueue``, ``kafka08``).
``tables`` and ``report`` turn one run into the tables and docs/performance.md;
``compiled`` supports the mypyc build's test job (which build runs:
``kpurgatory.pipeline.builds``). Nothing here is
imported by ``kpurgatory`` itself.
"""
