"""Stage 1, inputs: the problem schema and its resolution, catalogs, profiles, finance
defaults; importers that turn other tools' files into these."""
