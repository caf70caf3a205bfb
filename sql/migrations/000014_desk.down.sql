DROP TABLE IF EXISTS desk_rate, desk_token, desk_note_key, desk_saved_reply, desk_message,
  desk_conversation, desk_inbox_member, desk_inbox, desk_counter;
DROP FUNCTION IF EXISTS desk_query(text);
