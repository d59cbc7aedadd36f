-- omx.lua - Wireshark dissector for the Open-MX / MXoE wire protocol (EtherType 0x86DF),
-- every packet type of shared/spec/wire.md in both wire modes (extended default, MX-compatible).
--
-- Use:   tshark -X lua_script:tools/wireshark/omx.lua -r capture.pcap -V
--        wireshark: copy to ~/.local/lib/wireshark/plugins/ (or -X lua_script:...)
-- Preference omx.wire_mode: "auto" (default: guessed per frame), "extended" or "compat"; it only
-- matters for MEDIUM and PULL, whose layouts differ (wire.md 5.2, 5.4). Example:
--        tshark -X lua_script:omx.lua -o omx.wire_mode:compat ...
-- Field names are the spec's (omx.<field>); all multi-byte fields are big-endian.

local omx = Proto("omx", "Open-MX (MXoE)")

local ptypes = {
	[0] = "NONE", [1] = "RAW", [2] = "MFM_NIC_REPLY", [3] = "HOST_QUERY", [4] = "HOST_REPLY",
	[32] = "ETHER_UNICAST", [33] = "ETHER_MULTICAST", [34] = "ETHER_NATIVE", [35] = "TRUC",
	[36] = "CONNECT", [37] = "TINY", [38] = "SMALL", [39] = "MEDIUM", [40] = "RNDV", [41] = "PULL",
	[42] = "PULL_REPLY", [43] = "NOTIFY", [44] = "NACK_LIB", [45] = "NACK_MCP", [255] = "MAX",
}
local nack_types = { [0] = "NONE", [1] = "BAD_ENDPT", [2] = "ENDPT_CLOSED", [3] = "BAD_SESSION", [4] = "BAD_RDMAWIN" }
local truc_types = { [0x55] = "ACK" }
local connect_status = { [0] = "SUCCESS", [11] = "BAD_KEY" }

local f = {}
local function u(name, desc, b_, vals) f[name] = ProtoField.uint32("omx." .. name, desc, b_ or base.DEC, vals) end
f.dst_src_peer_index = ProtoField.uint16("omx.dst_src_peer_index", "Sender peer index (dst_src_peer_index)", base.DEC)
f.ptype = ProtoField.uint8("omx.ptype", "Packet type", base.DEC, ptypes)
u("dst_endpoint", "Destination endpoint")
u("src_endpoint", "Source endpoint")
u("src_generation", "Source generation")
u("length", "Length")
u("checksum", "Checksum", base.HEX)
u("lib_seqnum", "Library seqnum")
u("lib_piggyack", "Piggybacked ack")
u("match_a", "Match (high 32 bits)", base.HEX)
u("match_b", "Match (low 32 bits)", base.HEX)
f.match = ProtoField.uint64("omx.match", "Match", base.HEX)
u("session", "Session", base.HEX)
f.payload = ProtoField.bytes("omx.payload", "Payload")
u("frag_length", "Fragment length")
u("frag_seqnum", "Fragment number")
u("frag_pipeline", "Fragment pipeline (log2 size)")
u("msg_length", "Message length")
u("pulled_rdma_id", "Pulled region id")
u("pulled_rdma_seqnum", "Pulled region seqnum")
u("pulled_rdma_offset", "Pulled region offset")
u("total_length", "Total length")
u("src_pull_handle", "Source pull handle", base.HEX)
u("src_magic", "Source magic", base.HEX)
u("first_frame_offset", "First frame offset")
u("block_length", "Block length")
u("frame_index", "Frame index")
u("frame_seqnum", "Frame seqnum")
u("frame_length", "Frame length")
u("msg_offset", "Message offset")
u("dst_pull_handle", "Destination pull handle", base.HEX)
u("dst_magic", "Destination magic", base.HEX)
u("magic_endpoint", "Endpoint from magic (magic ^ 0x21071980)")
u("src_dst_peer_index", "Peer index of the destination in the sender's table (src_dst_peer_index)")
u("src_session_id", "Source session id", base.HEX)
u("app_key", "Application key", base.HEX)
u("target_session_id", "Target session id", base.HEX)
u("target_recv_seqnum_start", "Target receive seqnum start")
f.is_reply = ProtoField.bool("omx.is_reply", "Is reply")
u("connect_seqnum", "Connect seqnum")
u("connect_status_code", "Connect status", base.DEC, connect_status)
u("truc_type", "TRUC type", base.HEX, truc_types)
u("session_id", "Session id", base.HEX)
u("acknum", "Ack number")
u("send_seq", "Send seq")
u("resent", "Resent")
u("nack_type", "NACK type", base.DEC, nack_types)
u("magic", "Host query magic", base.HEX)
f.hostname = ProtoField.stringz("omx.hostname", "Hostname")
f.nic_id = ProtoField.uint64("omx.nic_id", "NIC id", base.HEX)
u("serial", "Discovery serial", base.HEX)
f.wire_mode = ProtoField.string("omx.wire_mode", "Wire mode (as dissected)")

local fl = {}
for _, v in pairs(f) do fl[#fl + 1] = v end
omx.fields = fl

omx.prefs.wire_mode = Pref.enum("Wire mode", 0, "Layout of MEDIUM and PULL packets",
	{ { 1, "auto", 0 }, { 2, "extended", 1 }, { 3, "compat", 2 } }, false)

local PULL_MAGIC = 0x21071980

-- add(tree, field, tvb, body_offset, size): big-endian field at body offset (frame offset 16 + off)
local function add(t, fld, b, off, size)
	if off + size > b:len() then return nil end
	return t:add(fld, b(off, size))
end

local function match64(t, b, off)
	if off + 8 > b:len() then return end
	t:add(f.match, b(off, 8))
end

local function compat_mode(ptype, b)
	local m = omx.prefs.wire_mode
	if m == 1 then return false end
	if m == 2 then return true end
	if ptype == 39 then
		-- compat MEDIUM: 16-bit length then a zero pad at 6..7, frag_pipeline = 12 at 27
		return b:len() > 27 and b(27, 1):uint() == 12 and b(6, 2):uint() == 0
	elseif ptype == 41 then
		-- extended PULL: 32-bit pulled_rdma_id (<= 255) at 12; compat: id, seqnum, offset(0)
		return b:len() > 16 and b(12, 3):uint() ~= 0
	end
	return false
end

local dissect = {}

local function msg_header(t, b)
	add(t, f.dst_endpoint, b, 1, 1); add(t, f.src_endpoint, b, 2, 1); add(t, f.src_generation, b, 3, 1)
	add(t, f.length, b, 4, 2); add(t, f.checksum, b, 6, 2); add(t, f.lib_seqnum, b, 8, 2)
	add(t, f.lib_piggyack, b, 10, 2); add(t, f.match_a, b, 12, 4); add(t, f.match_b, b, 16, 4)
	match64(t, b, 12); add(t, f.session, b, 20, 4)
end

local function msg_summary(b)
	if b:len() < 24 then return "" end
	return string.format(" %d->%d seq %d ack %d match 0x%08x%08x", b(2, 1):uint(), b(1, 1):uint(), b(8, 2):uint(),
		b(10, 2):uint(), b(12, 4):uint(), b(16, 4):uint())
end

dissect[37] = function(t, b) -- TINY
	msg_header(t, b)
	local len = b:len() >= 6 and b(4, 2):uint() or 0
	if len > 0 and 24 + len <= b:len() then t:add(f.payload, b(24, len)) end
	return msg_summary(b) .. " len " .. len
end
dissect[38] = dissect[37] -- SMALL

dissect[39] = function(t, b, compat) -- MEDIUM
	add(t, f.dst_endpoint, b, 1, 1); add(t, f.src_endpoint, b, 2, 1); add(t, f.src_generation, b, 3, 1)
	if compat then add(t, f.length, b, 4, 2) else add(t, f.length, b, 4, 4) end
	add(t, f.lib_seqnum, b, 8, 2); add(t, f.lib_piggyack, b, 10, 2)
	add(t, f.match_a, b, 12, 4); add(t, f.match_b, b, 16, 4); match64(t, b, 12); add(t, f.session, b, 20, 4)
	add(t, f.frag_length, b, 24, 2); add(t, f.frag_seqnum, b, 26, 1)
	if compat then add(t, f.frag_pipeline, b, 27, 1) end
	add(t, f.checksum, b, 28, 2)
	if b:len() < 32 then return "" end
	local fl_ = b(24, 2):uint()
	if fl_ > 0 and 32 + fl_ <= b:len() then t:add(f.payload, b(32, fl_)) end
	local total = compat and b(4, 2):uint() or b(4, 4):uint()
	return msg_summary(b) .. string.format(" frag %d len %d of %d", b(26, 1):uint(), fl_, total)
end

dissect[40] = function(t, b) -- RNDV
	msg_header(t, b)
	add(t, f.msg_length, b, 24, 4); add(t, f.pulled_rdma_id, b, 28, 1)
	add(t, f.pulled_rdma_seqnum, b, 29, 1); add(t, f.pulled_rdma_offset, b, 30, 2)
	if b:len() < 32 then return "" end
	return msg_summary(b) .. string.format(" msg_length %d region %d", b(24, 4):uint(), b(28, 1):uint())
end

dissect[41] = function(t, b, compat) -- PULL
	add(t, f.dst_endpoint, b, 1, 1); add(t, f.src_endpoint, b, 2, 1); add(t, f.src_generation, b, 3, 1)
	add(t, f.session, b, 4, 4); add(t, f.total_length, b, 8, 4)
	local ho, mo
	if compat then
		add(t, f.pulled_rdma_id, b, 12, 1); add(t, f.pulled_rdma_seqnum, b, 13, 1)
		add(t, f.pulled_rdma_offset, b, 14, 2); add(t, f.src_pull_handle, b, 16, 4)
		add(t, f.src_magic, b, 20, 4); add(t, f.first_frame_offset, b, 24, 2)
		add(t, f.block_length, b, 26, 2); add(t, f.frame_index, b, 28, 4)
		ho, mo = 16, 20
	else
		add(t, f.pulled_rdma_id, b, 12, 4); add(t, f.pulled_rdma_seqnum, b, 16, 1)
		add(t, f.pulled_rdma_offset, b, 20, 4); add(t, f.src_pull_handle, b, 24, 4)
		add(t, f.src_magic, b, 28, 4); add(t, f.first_frame_offset, b, 32, 4)
		add(t, f.block_length, b, 36, 4); add(t, f.frame_index, b, 40, 4)
		ho, mo = 24, 28
	end
	if mo + 4 > b:len() then return "" end
	t:add(f.magic_endpoint, bit.band(bit.bxor(b(mo, 4):uint(), PULL_MAGIC), 0xff)):set_generated()
	return string.format(" %d->%d handle 0x%x total %d", b(2, 1):uint(), b(1, 1):uint(), b(ho, 4):uint(),
		b(8, 4):uint())
end

dissect[42] = function(t, b) -- PULL_REPLY
	add(t, f.frame_seqnum, b, 1, 1); add(t, f.frame_length, b, 2, 2); add(t, f.msg_offset, b, 4, 4)
	add(t, f.dst_pull_handle, b, 8, 4); add(t, f.dst_magic, b, 12, 4)
	if b:len() < 16 then return "" end
	t:add(f.magic_endpoint, bit.band(bit.bxor(b(12, 4):uint(), PULL_MAGIC), 0xff)):set_generated()
	local len = b(2, 2):uint()
	if len > 0 and 16 + len <= b:len() then t:add(f.payload, b(16, len)) end
	return string.format(" handle 0x%x frame %d offset %d len %d", b(8, 4):uint(), b(1, 1):uint(), b(4, 4):uint(), len)
end

dissect[43] = function(t, b) -- NOTIFY
	add(t, f.dst_endpoint, b, 1, 1); add(t, f.src_endpoint, b, 2, 1); add(t, f.src_generation, b, 3, 1)
	add(t, f.session, b, 4, 4); add(t, f.total_length, b, 8, 4); add(t, f.pulled_rdma_id, b, 12, 1)
	add(t, f.pulled_rdma_seqnum, b, 13, 1); add(t, f.lib_seqnum, b, 18, 2); add(t, f.lib_piggyack, b, 20, 2)
	if b:len() < 24 then return "" end
	return string.format(" %d->%d seq %d total %d", b(2, 1):uint(), b(1, 1):uint(), b(18, 2):uint(), b(8, 4):uint())
end

dissect[36] = function(t, b) -- CONNECT
	add(t, f.dst_endpoint, b, 1, 1); add(t, f.src_endpoint, b, 2, 1); add(t, f.src_generation, b, 3, 1)
	add(t, f.length, b, 4, 1); add(t, f.lib_seqnum, b, 8, 2); add(t, f.src_dst_peer_index, b, 10, 2)
	add(t, f.src_session_id, b, 16, 4)
	if b:len() < 32 then return "" end
	local reply = b(26, 1):uint() ~= 0
	if reply then add(t, f.target_session_id, b, 20, 4) else add(t, f.app_key, b, 20, 4) end
	add(t, f.target_recv_seqnum_start, b, 24, 2); t:add(f.is_reply, b(26, 1)); add(t, f.connect_seqnum, b, 27, 1)
	if reply then add(t, f.connect_status_code, b, 28, 1) end
	return string.format(" %s %d->%d connect_seqnum %d%s", reply and "reply" or "request", b(2, 1):uint(),
		b(1, 1):uint(), b(27, 1):uint(), reply and (" status " .. b(28, 1):uint()) or "")
end

dissect[35] = function(t, b) -- TRUC (liback)
	add(t, f.dst_endpoint, b, 1, 1); add(t, f.src_endpoint, b, 2, 1); add(t, f.src_generation, b, 3, 1)
	add(t, f.length, b, 4, 1); add(t, f.session, b, 8, 4); add(t, f.truc_type, b, 12, 1)
	add(t, f.lib_seqnum, b, 14, 2); add(t, f.session_id, b, 16, 4); add(t, f.acknum, b, 20, 4)
	add(t, f.send_seq, b, 24, 2); add(t, f.resent, b, 26, 1)
	if b:len() < 28 then return "" end
	return string.format(" %d->%d liback seq %d acknum %d", b(2, 1):uint(), b(1, 1):uint(), b(14, 2):uint(),
		b(20, 4):uint())
end

dissect[44] = function(t, b) -- NACK_LIB
	add(t, f.src_endpoint, b, 1, 1); add(t, f.src_generation, b, 2, 1); add(t, f.nack_type, b, 3, 1)
	add(t, f.dst_endpoint, b, 9, 1); add(t, f.dst_src_peer_index, b, 10, 2); add(t, f.lib_seqnum, b, 12, 2)
	if b:len() < 16 then return "" end
	return string.format(" %s from endpoint %d seq %d", nack_types[b(3, 1):uint()] or "?", b(1, 1):uint(),
		b(12, 2):uint())
end

dissect[45] = function(t, b) -- NACK_MCP
	add(t, f.src_endpoint, b, 1, 1); add(t, f.src_generation, b, 2, 1); add(t, f.nack_type, b, 3, 1)
	add(t, f.src_pull_handle, b, 8, 4); add(t, f.src_magic, b, 12, 4)
	if b:len() < 16 then return "" end
	t:add(f.magic_endpoint, bit.band(bit.bxor(b(12, 4):uint(), PULL_MAGIC), 0xff)):set_generated()
	return string.format(" %s handle 0x%x", nack_types[b(3, 1):uint()] or "?", b(8, 4):uint())
end

dissect[3] = function(t, b) -- HOST_QUERY
	add(t, f.src_dst_peer_index, b, 2, 2); add(t, f.magic, b, 8, 4)
	if b:len() < 12 then return "" end
	return string.format(" magic 0x%08x", b(8, 4):uint())
end

dissect[4] = function(t, b) -- HOST_REPLY
	add(t, f.length, b, 1, 1); add(t, f.src_dst_peer_index, b, 2, 2); add(t, f.magic, b, 8, 4)
	if b:len() < 16 then return "" end
	local len = b(1, 1):uint()
	if len > 0 and 16 + len <= b:len() then
		t:add(f.hostname, b(16, len))
		return string.format(" %s", b(16, len):stringz())
	end
	return ""
end

dissect[1] = function(t, b) -- RAW (omxoed discovery frame when 48 bytes)
	if b:len() >= 28 then
		t:add(f.nic_id, b(16, 8)); add(t, f.serial, b, 24, 4)
		return string.format(" discovery nic %012x serial 0x%08x", b(16, 8):uint64():tonumber(), b(24, 4):uint())
	end
	return ""
end

function omx.dissector(tvb, pinfo, tree)
	if tvb:len() < 3 then return 0 end
	pinfo.cols.protocol = "OMX"
	local t = tree:add(omx, tvb())
	t:add(f.dst_src_peer_index, tvb(0, 2))
	local ptype = tvb(2, 1):uint()
	t:add(f.ptype, tvb(2, 1))
	local b = tvb(2):tvb()
	local name = ptypes[ptype] or string.format("UNKNOWN(%d)", ptype)
	local fn = dissect[ptype]
	local info = ""
	if fn then
		local compat = compat_mode(ptype, b)
		if ptype == 39 or ptype == 41 then
			t:add(f.wire_mode, compat and "compat" or "extended"):set_generated()
		end
		info = fn(t, b, compat) or ""
	end
	t:append_text(", " .. name .. info)
	pinfo.cols.info = name .. info
	return tvb:len()
end

DissectorTable.get("ethertype"):add(0x86DF, omx)
