"""The coordinator runtime: the engine every coordinator runs on, as shards per partition."""
