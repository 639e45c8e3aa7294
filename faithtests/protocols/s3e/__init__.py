"""S3E (semantic stress in forced-choice captioning): A/B behaviour of a generative VLM in both option
orders, and how far its pre-answer hidden state moves under semantic stress versus lexical controls.
The protocol on one page: README.md beside this file."""
