"""The scheduling framework: session over a snapshot, statements, stages and the expression language."""
