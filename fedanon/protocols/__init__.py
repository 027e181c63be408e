"""protocols subpackage of fedanon."""
