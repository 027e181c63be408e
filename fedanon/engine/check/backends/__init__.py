"""Where the rows of a large table are grouped: backends behind the RowPartitions interface."""
