"""Strategies: who computes what, in which order. One subpackage per strategy (``strategy=<name>``
picks ``gnnscale/strategies/<name>/``), each holding its class and everything only it uses;
:mod:`gnnscale.strategies.base` is the contract the runner knows."""
