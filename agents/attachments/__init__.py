"""Files attached in the chat, as bytes: ``files.py`` tells what a file really is and refuses
what must not be read (a lying extension, a zip bomb, an encrypted or endless PDF);
``extract.py`` reads the text of an accepted file into passages with their locations. Both
are plain functions over bytes; storing, indexing and searching are in
``agents/services/attachments.py``."""
