"""proto subpackage of fedanon."""
