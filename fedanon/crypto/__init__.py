"""crypto subpackage of fedanon."""
