"""The app's server side: the shared model and its thread, the AR-vs-BiTA race, chat sessions, handlers
and the page layout."""
