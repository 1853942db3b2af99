"""The InfiniBand fabric collector: ``parse`` (ibnetdiscover, pure), ``hosts`` (description →
node, pure), ``collector``."""
