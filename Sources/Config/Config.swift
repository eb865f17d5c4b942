// The Config module: YAML -> node tree with marks -> typed, validated settings.
