"""What the model is: loading it (the embedded default, any HF causal LM, a GGUF; chat encoding), what BiTA
adds to it (the adapter: prompt KV and mask embeddings; its files, card and the shipped adapters), its
stored draft-rank statistics and the self-generated data set's files. How its passes run is the runtime's
(bita/runtime/)."""
