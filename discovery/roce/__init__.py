"""The per-node RoCE agent: ``parse`` (pure parsers), ``sources`` (files, sysfs, tools), ``agent``."""
