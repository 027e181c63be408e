"""What several commands share: flags and TOML run files, input loading, summary tables."""
