// ember_data sources land with the tokenizer and shard work.
