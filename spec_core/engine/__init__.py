"""The loop and what surrounds it: method names parsed into parts (``methods``), a round's event and clock
(``events``), the loop itself (``loop``), lanes side by side (``session``), policies and lookup replayed on a
recorded text (``replay``, ``lookup_replay``), the evaluation suite (``rewards``)."""
