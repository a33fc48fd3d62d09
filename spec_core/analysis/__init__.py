"""Tools that run the engine and measure it: ``bench`` (methods side by side), ``peers`` (transformers' own
generate), ``costs`` (forward costs, engine overhead, the speedup model), ``block`` (block drafters per loss)."""
