"""Results: the Parquet schemas, readers of raw outputs, profiling analysis, aggregation."""
