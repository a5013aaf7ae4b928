"""The Atlas side: typedefs, the model-to-entities converter, the REST client and the sinks."""
