"""Dataset loaders: raw releases (local path or URL) -> validated Parquet with a documented schema."""
