"""engine subpackage of fedanon."""
