"""The informer-fed cluster cache and the API→model conversion."""
