"""The mutating admission webhook (hop ①: a training pod gets its quota at admission)."""
