"""The quota-binder loop: cycles of the scheduler turned into API writes."""
