"""What computes the cells: the `Backend` protocol and its registry (`base`), one module or
package per backend (`transformers`, `vllm`, `openai`)."""
