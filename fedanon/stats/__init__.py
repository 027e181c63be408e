"""Class statistics every layer above shares: key arithmetic, class tables, sensitive histograms,
the SNB estimate of population uniques."""
