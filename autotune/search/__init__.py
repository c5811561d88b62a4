"""Search: the knob space, measurement executors, the trial log, the cost model and the tuner loop.

Submodules load their heavy dependencies (optuna, xgboost, ray) on first use.
"""
