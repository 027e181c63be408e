"""The data layer: dictionary-encoded tables, hierarchies and their builders, and readers/writers of files."""
