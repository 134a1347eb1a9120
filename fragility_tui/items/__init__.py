"""Items: the item record, four-option assembly and sampling, loaders, sources and file formats."""
