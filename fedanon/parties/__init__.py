"""parties subpackage of fedanon."""
